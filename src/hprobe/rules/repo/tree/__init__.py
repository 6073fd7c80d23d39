"""Reading an engine tree: its modules indexed with ast, the mapping files, its
model registry and the settings that route a count to FlashInfer. The lowest
part of `rules.repo`: imports nothing of interpreter/, tracing/ or the modules
that put the parts together."""
