"""The learned ranking: the features it reads, its model file and its evaluator."""
