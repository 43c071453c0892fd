"""Generation: a language model's greedy decoding of a fixed number of tokens, timed token
by token (time to first token, time per output token, inter-token latency, tokens/s)."""
