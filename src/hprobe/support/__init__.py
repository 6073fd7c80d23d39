"""Where answers come from: the installed flashinfer in process, other
releases fetched and probed in workers, the results cache."""
