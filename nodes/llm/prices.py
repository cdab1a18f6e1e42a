"""What a call cost: tokens times the model's price (USD per million tokens).

Prices come only from `ModelConfig.prices` (`--price MODEL=IN/OUT`): a model without a price
costs an unknown amount (None), which makes the run's total unknown too. Scripted and replayed
models cost nothing.
"""

from __future__ import annotations

from kernelgraph.state.config import ModelConfig, Price

PER = 1_000_000


def price_of(model: ModelConfig, name: str) -> Price | None:
    return model.prices.get(name)


def cost(
    price: Price | None, tokens_in: int | None, tokens_out: int | None, free: bool = False
) -> float | None:
    """USD for one call; None when the price or the token counts are unknown."""
    if free:
        return 0.0
    if price is None or tokens_in is None or tokens_out is None:
        return None
    return (tokens_in * price.input + tokens_out * price.output) / PER
