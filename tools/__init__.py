"""Tools beside the benchmarks: they prepare or read runs rather than time a contender (learning
curves of two runs, a tiny SQuAD export for the serving benchmarks, the FastBertTokenizer parity
count, the family accuracy runs); run as `python -m tools.<name>`."""
