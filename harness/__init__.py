"""The process harness that the tests and the benchmarks share: children in process groups of
their own that die with the process that started them (watchdog), `batchd serve`, `vllm serve`,
SeaweedFS and fake-upstream processes on free ports, one way to make an `openai` client and one
way to wait for a batch. Neither tests/ nor bench/ is imported from here."""
