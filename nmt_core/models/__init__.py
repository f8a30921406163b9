"""The two architectures (the RNN encoder-decoder, the Transformer) and the attention modules inside them: the
nn.Modules that compute each declared part, the pipeline they run in, and the model builder. May import the config,
the family's declarations and the gates; never data, training or anything above."""
