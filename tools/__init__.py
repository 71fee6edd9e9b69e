"""Tools beside the benchmarks: they check a machine, prepare runs or read them, rather than time
one contender against another (the device check, learning curves of two runs, a tiny SQuAD export
for the serving benchmarks, the FastBertTokenizer parity count, the family accuracy runs); run as
`python -m tools.<name>`."""
