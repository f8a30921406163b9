"""The shared NMT core every trial trains: data, model, attention family, training, decoding, BLEU."""
