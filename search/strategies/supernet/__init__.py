"""The weight-sharing strategy (`search.strategy: supernet`). Its space part: the settings of
`search.supernet:`, its fingerprint and checks (settings), what a space shares (elastic). Its
engine part: the strategy (strategy), the evaluation trials use instead of training
(evaluation), successive halving over subnets (halving), fine-tuning the front and the final
training's inherited start (finetune), and below them the supernet and its masks (network),
subnets taken out of it (extract), the sandwich step (steps), its training with checkpoints
(train) and the epochs that fit a time budget (budget)."""
