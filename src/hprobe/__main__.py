from hprobe.cli.app import run

run()
