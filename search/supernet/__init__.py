"""The weight-sharing strategy (`search.strategy: supernet`): what a space shares (elastic),
the supernet and its masks (network), subnets taken out of it (extract), its sandwich training
with checkpoints (train), and the evaluation trials use instead of training (evaluation)."""
