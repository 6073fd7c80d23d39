"""A kernel probe run over SMs x head counts, its raw calls turned into outcomes with evidence."""
