"""Models run in this process: one vLLM ``AsyncLLM`` per model (:mod:`.registry`), started
the way ``vllm serve`` starts it (:mod:`.launch`), answering through vLLM's own serving
classes (:mod:`.model_engine`, :mod:`.requests`), with the process settings that keep CPU
inference lean (:mod:`.allocator`, :mod:`.cpu_affinity`, :mod:`.cpu_priority`) and engine
processes that never outlive their parent (:mod:`.orphans`). Everything here imports vLLM.
"""
