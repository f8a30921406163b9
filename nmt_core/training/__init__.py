"""Training, decoding and evaluation of one trial: the training loop and its loss, checkpoints, bilingual
symmetry, the compiled and CUDA-graph step, greedy and beam search with attention traces, BLEU and the seed-aware
test, diagnostics and inference from raw text. The top of nmt_core below its commands: may import every layer
beneath it (data, models, family, config, gates), knows nothing of Ray or MLflow."""
