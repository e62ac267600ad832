"""benchmarks/fashion_verdicts.py: the Fashion-MNIST proof's verdicts with each figure's noise.
A margin of a point decides; under a point only 3 seeds each, further apart than their spreads
together, decide, else it is a tie; throughput beyond both intervals; the goals from the table;
the networks whose verdict waits for seeds. Hand-made rows, nothing trained."""

from __future__ import annotations

from typing import Any

import pytest

from .package import benchmark


def _row(
    name: str,
    accuracy: float,
    low: float,
    high: float,
    *,
    sd: float | None = None,
    seeds: int = 1,
    front: str | None = "trials s0",
) -> dict[str, Any]:
    kind = "reference" if " trial " not in name else "front"
    return {
        "name": name,
        "kind": kind,
        **({"front": front} if kind == "front" else {}),
        "test_accuracy": accuracy,
        "test_accuracy_sd": sd,
        "seeds": seeds,
        "images_per_s": (low + high) / 2,
        "low": low,
        "high": high,
        "params": 1000,
    }


def _pair(
    a: float, b: float, sd_a: float | None = None, sd_b: float | None = None, seeds: tuple[int, int] = (1, 1)
) -> str:
    verdicts = benchmark("fashion_verdicts")
    return str(
        verdicts.accuracy(
            _row("x trial 1", a, 1, 2, sd=sd_a, seeds=seeds[0]), _row("y", b, 1, 2, sd=sd_b, seeds=seeds[1])
        )
    )


def test_a_point_decides_and_under_a_point_one_seed_is_a_tie() -> None:
    assert _pair(0.935, 0.920) == "higher" and _pair(0.920, 0.935) == "lower"
    assert _pair(0.94, 0.93) == "higher"  # exactly a point (0.94 - 0.93 is 0.00999... in floats)
    assert _pair(0.9399, 0.93) == "tie"  # 0.99 points
    assert _pair(0.930, 0.930) == "tie"
    # The seeds' spread cannot decide what one seed leaves open, however small the other's.
    assert _pair(0.935, 0.930, None, 0.0001, seeds=(1, 3)) == "tie"


def test_under_a_point_three_seeds_each_decide_only_beyond_both_spreads() -> None:
    # 0.5 points apart: spreads of 0.1 point each leave the means apart (0.5 > 0.2)...
    assert _pair(0.935, 0.930, 0.001, 0.001, seeds=(3, 3)) == "higher"
    assert _pair(0.930, 0.935, 0.001, 0.001, seeds=(3, 3)) == "lower"
    # ...spreads of 0.3 point each do not (0.5 < 0.6), nor 0.25 each (0.5 is not beyond 0.5).
    assert _pair(0.935, 0.930, 0.003, 0.003, seeds=(3, 3)) == "tie"
    assert _pair(0.935, 0.930, 0.0025, 0.0025, seeds=(3, 3)) == "tie"
    # Two seeds are not enough, whatever their spread.
    assert _pair(0.935, 0.930, 0.0001, 0.0001, seeds=(2, 3)) == "tie"


def test_a_network_dominates_only_faster_beyond_both_intervals_and_more_accurate_by_the_rule() -> None:
    verdicts = benchmark("fashion_verdicts")
    reference = _row("mobilenet_v2_0.35", 0.90, 900, 1100)
    assert verdicts.versus(_row("t trial 1", 0.92, 1200, 1400), reference) == "dominates"
    assert verdicts.versus(_row("t trial 2", 0.905, 1200, 1400), reference) == "tie"  # half a point, one seed
    assert verdicts.versus(_row("t trial 3", 0.88, 5000, 6000), reference) is None  # less accurate
    assert verdicts.versus(_row("t trial 4", 0.95, 1000, 1500), reference) is None  # intervals overlap
    assert verdicts.versus(_row("t trial 5", 0.95, 1100, 1500), reference) is None  # touching is not beyond
    settled = _row("t trial 6", 0.905, 1200, 1400, sd=0.001, seeds=3)
    assert verdicts.versus(settled, {**reference, "test_accuracy_sd": 0.001, "seeds": 3}) == "dominates"


def test_each_front_is_judged_on_its_own_networks_and_ties_are_reported_as_ties() -> None:
    verdicts = benchmark("fashion_verdicts")
    table = [
        _row("trials s0 trial 1", 0.93, 1200, 1400),
        _row("trials s0 trial 7", 0.906, 2800, 2900),
        _row("supernet s0 trial 5", 0.92, 3000, 3200, front="supernet s0"),
        _row("mobilenet_v2_0.35", 0.90, 900, 1100),  # both fronts dominate it (trial 7 ties)
        _row("mobilenet_v3_small", 0.91, 2500, 2700),  # the subnet dominates it; trial 7 only ties
        _row("two_conv_bn", 0.912, 2000, 2200),  # trial 7 and the subnet are faster, but within a point
        _row("efficientnet_b0", 0.96, 100, 120),  # nobody: the most accurate
    ]
    by_front = verdicts.judge(table)
    assert by_front == {
        "trials s0": {
            "dominates": ["mobilenet_v2_0.35"],
            "ties": ["mobilenet_v3_small", "two_conv_bn"],
            "not_dominated": ["efficientnet_b0"],
        },
        "supernet s0": {
            "dominates": ["mobilenet_v2_0.35", "mobilenet_v3_small"],
            "ties": ["two_conv_bn"],
            "not_dominated": ["efficientnet_b0"],
        },
    }
    assert table[3]["dominated_by"] == ["trials s0 trial 1", "supernet s0 trial 5"]
    assert table[3]["ties"] == ["trials s0 trial 7"]  # 0.6 points, one seed
    assert table[4]["dominated_by"] == ["supernet s0 trial 5"] and table[4]["ties"] == ["trials s0 trial 7"]
    assert table[5]["dominated_by"] == [] and table[5]["ties"] == ["trials s0 trial 7", "supernet s0 trial 5"]


def _judged(table: list[dict[str, Any]], budgets: dict[str, float] | None = None) -> dict[str, Any]:
    verdicts = benchmark("fashion_verdicts")
    verdicts.judge(table)
    return dict(verdicts.goals(table, [r["name"] for r in table if r["kind"] == "reference"], budgets))


def test_every_reference_dominated_is_met_only_when_none_stands_or_ties() -> None:
    verdicts = benchmark("fashion_verdicts")
    fast = _row("trials s0 trial 1", 0.95, 9000, 9500)
    beaten = _row("mobilenet_v2_0.35", 0.90, 900, 1100)
    tied = _row("two_conv_bn", 0.945, 4000, 4200)  # half a point: a tie
    standing = _row("efficientnet_b0", 0.96, 100, 120)
    assert _judged([fast, beaten])["references_dominated"]["verdict"] == "met"
    goal = _judged([fast, beaten, tied])["references_dominated"]
    assert goal["verdict"] == "tie" and goal["ties"] == ["two_conv_bn"]
    goal = _judged([fast, beaten, tied, standing])["references_dominated"]
    assert goal["verdict"] == "not met" and goal["not_dominated"] == ["efficientnet_b0"]
    # A reference without figures yet: incomplete, unless one already stands.
    verdicts.judge([fast, beaten])
    goal = verdicts.goals([fast, beaten], ["mobilenet_v2_0.35", "resnet20"])["references_dominated"]
    assert goal["verdict"] == "incomplete" and goal["missing"] == ["resnet20"]


@pytest.mark.parametrize(
    ("accuracy", "seeds", "expected"),
    [
        (0.951, 3, "met"),
        (0.950, 3, "met"),
        (0.9499, 3, "not met"),  # three seeds decide: under the goal
        (0.952, 1, "tie"),  # one seed above the goal: its mean of three decides
        (0.941, 2, "tie"),  # within a point under it, fewer than three seeds
        (0.939, 1, "not met"),  # over a point under it
    ],
)
def test_the_accuracy_goal_is_the_mean_of_three_seeds(accuracy: float, seeds: int, expected: str) -> None:
    sd = 0.001 if seeds > 1 else None
    table = [_row("trials s0 trial 3", accuracy, 1000, 1100, sd=sd, seeds=seeds), _row("resnet20", 0.93, 10, 20)]
    goal = _judged(table)["accuracy"]
    assert goal["verdict"] == expected and goal["best"]["name"] == "trials s0 trial 3"


def test_the_accuracy_goal_counts_its_front_s_search_and_one_seed_s_training() -> None:
    table = [
        _row("trials s0 trial 3", 0.955, 1000, 1100, sd=0.001, seeds=3),
        _row("supernet s0 trial 8", 0.951, 1000, 1100, sd=0.001, seeds=3, front="supernet s0"),
    ]
    goal = _judged(table, {"trials s0": 4 * 3600.0, "supernet s0": 2.5 * 3600.0})["accuracy"]
    assert goal["verdict"] == "met" and goal["best"]["name"] == "supernet s0 trial 8"  # the other took 4 h
    assert goal["budget"] == {"seconds": 9000, "within": True}
    goal = _judged(table, {"trials s0": 4 * 3600.0, "supernet s0": 3.5 * 3600.0})["accuracy"]
    assert goal["verdict"] == "not met" and goal["budget"] == {"seconds": 14400, "within": False}


def test_the_speed_up_goal_is_twice_the_two_conv_network_beyond_both_intervals_at_its_accuracy() -> None:
    two_conv = _row("two_conv_bn", 0.933, 6500, 7000)

    def goal(*networks: dict[str, Any]) -> dict[str, Any]:
        return dict(_judged([*networks, two_conv])["speedup_at_two_conv"])

    met = goal(_row("trials s0 trial 1", 0.945, 14100, 15000), _row("trials s0 trial 2", 0.95, 13000, 14500))
    assert met["verdict"] == "met" and met["by"] == ["trials s0 trial 1"]  # trial 2 is not 2x beyond the intervals
    assert (
        met["fastest_more_accurate"]["name"] == "trials s0 trial 1" and met["fastest_more_accurate"]["speedup"] == 2.16
    )
    assert met["fastest_tied"] is None
    tied = goal(_row("trials s0 trial 1", 0.930, 14100, 15000))  # 0.3 points under it, one seed
    assert tied["verdict"] == "tie" and tied["ties"] == ["trials s0 trial 1"]
    assert tied["fastest_more_accurate"] is None and tied["fastest_tied"]["speedup"] == 2.16
    assert goal(_row("trials s0 trial 1", 0.920, 14100, 15000))["verdict"] == "not met"
    assert _judged([_row("trials s0 trial 1", 0.95, 1, 2)])["speedup_at_two_conv"]["verdict"] == "incomplete"


def test_seeds_are_wanted_only_where_a_tie_stands_between_a_verdict_and_its_decision() -> None:
    verdicts = benchmark("fashion_verdicts")
    table = [
        _row("trials s0 trial 1", 0.93, 1200, 1400),
        _row("trials s0 trial 2", 0.905, 1600, 1800),
        _row("supernet s0 trial 4", 0.945, 500, 600, front="supernet s0"),  # within a point of 0.950
        _row("mobilenet_v2_0.35", 0.90, 900, 1100),  # dominated by trial 1: its tie with trial 2 decides nothing
        _row("mobilenet_v3_small", 0.91, 1450, 1550, sd=0.001, seeds=3),  # only trial 2 is faster: a tie
        _row("two_conv_bn", 0.94, 500, 550),  # those 2x as fast are a point or more less accurate: no tie
    ]
    verdicts.judge(table)
    judged = verdicts.goals(table, ["mobilenet_v2_0.35", "mobilenet_v3_small", "two_conv_bn"])
    # The reference has its three seeds: only trial 2 wants them; the supernet's network for the
    # accuracy goal.
    assert verdicts.wanted_seeds(table, judged) == {"supernet s0 trial 4": 1, "trials s0 trial 2": 1}
    # A tie that stands between the speed-up goal and met wants both sides' seeds.
    fast = _row("trials s0 trial 9", 0.935, 1200, 1400)
    table = [fast, _row("two_conv_bn", 0.94, 500, 550)]
    verdicts.judge(table)
    judged = verdicts.goals(table, ["two_conv_bn"])
    assert judged["speedup_at_two_conv"]["verdict"] == "tie"
    assert verdicts.wanted_seeds(table, judged) == {"trials s0 trial 9": 1, "two_conv_bn": 1}


def test_the_goals_are_said_in_one_line_each() -> None:
    verdicts = benchmark("fashion_verdicts")
    table = [
        _row("trials s0 trial 1", 0.9512, 14100, 15000, sd=0.0008, seeds=3),
        _row("two_conv_bn", 0.933, 6500, 7000),
    ]
    lines = verdicts.summary(_judged(table, {"trials s0": 10000.0}))
    assert lines == [
        "every reference dominated by a final-trained nas network: met",
        "best mean test accuracy >= 0.950 over 3 seeds: met (best: trials s0 trial 1 0.9512 ± 0.0008, 3 seeds); "
        "its front's search and one seed's final training: 2.78 h, within 3 h",
        "at the 2-conv network's accuracy, >= 2x its throughput: met (by: trials s0 trial 1); fastest more accurate: "
        "trials s0 trial 1 0.9512 ± 0.0008, 3 seeds, 2.16x",
    ]
