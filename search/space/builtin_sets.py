"""The data sets nas reads by their Keras names: their channels and class names, which a space
knows without reading any file (the networks' input and output shapes). Where their files are
and how they are read is search/data/builtin.py's business."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BuiltinSet:
    channels: int
    classes: tuple[str, ...]
    train: int  # images in the official training split
    test: int  # and in its test split


_CIFAR100 = """apple aquarium_fish baby bear beaver bed bee beetle bicycle bottle bowl boy bridge bus
butterfly camel can castle caterpillar cattle chair chimpanzee clock cloud cockroach couch crab
crocodile cup dinosaur dolphin elephant flatfish forest fox girl hamster house kangaroo keyboard
lamp lawn_mower leopard lion lizard lobster man maple_tree motorcycle mountain mouse mushroom
oak_tree orange orchid otter palm_tree pear pickup_truck pine_tree plain plate poppy porcupine
possum rabbit raccoon ray road rocket rose sea seal shark shrew skunk skyscraper snail snake
spider squirrel streetcar sunflower sweet_pepper table tank telephone television tiger tractor
train trout tulip turtle wardrobe whale willow_tree wolf woman worm"""

BUILTIN_SETS: dict[str, BuiltinSet] = {
    "fashion_mnist": BuiltinSet(
        1,
        (
            "T-shirt/top",
            "Trouser",
            "Pullover",
            "Dress",
            "Coat",
            "Sandal",
            "Shirt",
            "Sneaker",
            "Bag",
            "Ankle boot",
        ),
        60000,
        10000,
    ),
    "mnist": BuiltinSet(1, tuple(str(d) for d in range(10)), 60000, 10000),
    "cifar10": BuiltinSet(
        3,
        ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"),
        50000,
        10000,
    ),
    # The fine labels, in the order of the data set's own meta file (alphabetical).
    "cifar100": BuiltinSet(3, tuple(_CIFAR100.split()), 50000, 10000),
}
