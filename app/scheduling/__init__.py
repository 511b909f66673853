"""How batchd shares engines between projects, as pure functions over plain data (no database,
no asyncio): fair share and deadlines (fair_share), which waiting project an engine slot goes to
(gate_order), which shards a replica claims or gives back (admission), and the priority number a
line carries to the engine (priority). The gates and the worker call them with what they read."""
