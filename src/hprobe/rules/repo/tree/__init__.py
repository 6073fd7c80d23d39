"""Reading an engine tree: its modules indexed with ast, the mapping files, its
model registry, the settings that route a count to FlashInfer, and the padding
table found in it."""
