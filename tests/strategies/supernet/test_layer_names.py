"""The supernet's side of the plan's names (tests/nets/test_layer_names.py has the builder's
and pruning's): its weights are the builder's layers, its channel orders the plan's groups,
and a subnet taken out of it has exactly the layers its plan names."""

from __future__ import annotations

from .test_supernet import _elastic


def test_the_supernet_holds_the_weights_the_plan_names_in_the_builders_shapes() -> None:
    """Builder, supernet, extraction and channel sorting read one plan's names and groups."""
    from nas.search.nets import build_plan, plan_network
    from nas.search.strategies.supernet.extract import extract
    from nas.search.strategies.supernet.network import Supernet

    elastic = _elastic()
    supernet = Supernet(elastic.space.candidate(elastic.largest, num_classes=10, channels=1), seed=0)
    built = build_plan(supernet.plan)
    shapes = {layer.name: [tuple(w.shape) for w in layer.weights] for layer in built.layers if layer.weights}
    assert {name: [tuple(w.shape) for w in ws] for name, ws in supernet.layers.items()} == shapes
    keys = dict(supernet.variables())
    orders = supernet.channel_orders()
    assert set(orders) == {g.name for g in supernet.plan.channel_groups()}
    for group in supernet.plan.channel_groups():
        spans = orders[group.name]
        assert spans[0] == (f"{group.consumer.layer}/{group.consumer.weight}", group.consumer.axis)
        assert len(spans) == len(group.spans)
        for key, axis in spans:
            assert keys[key].shape[axis] == group.size, key
    candidate = elastic.space.candidate(elastic.smallest, num_classes=10, channels=1)
    subnet = extract(supernet, candidate)
    assert [layer.name for layer in subnet.layers] == list(plan_network(candidate).layer_names())
