"""The gates: what comes in from a user, a file, the environment or a server is checked here, and what goes out
(messages, files, requests) passes here: one-line errors (ConfigError), bounded YAML and stored-file decoders,
regular files only, secrets hidden, one deadline per command and bounded HTTP, the settings' declarations and the
parser both CLIs share. Knows nothing of NMT: it imports nothing of the project outside this folder, so every other
layer (the model's config, the data, the sweeper) may import it."""
