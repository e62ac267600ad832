"""Networks: the TF-free plan of a candidate (params, FLOPs, size), static constraints, the
survey behind `nas space`, the Keras builder and channel surgery."""

from typing import TYPE_CHECKING

from nas._lazy import lazy_exports

if TYPE_CHECKING:
    from nas.search.nets.build import build_model as build_model
    from nas.search.nets.build import build_plan as build_plan
    from nas.search.nets.build import count_flops as count_flops
    from nas.search.nets.channels import deployed_plan as deployed_plan
    from nas.search.nets.channels import pruned_plan as pruned_plan
    from nas.search.nets.channels import transfer as transfer
    from nas.search.nets.constraints import static_constraints as static_constraints
    from nas.search.nets.plan import BN_EPSILON as BN_EPSILON
    from nas.search.nets.plan import BN_MOMENTUM as BN_MOMENTUM
    from nas.search.nets.plan import HEAD_HIDDEN as HEAD_HIDDEN
    from nas.search.nets.plan import LOGITS as LOGITS
    from nas.search.nets.plan import RESIZE as RESIZE
    from nas.search.nets.plan import BlockPlan as BlockPlan
    from nas.search.nets.plan import ChannelGroup as ChannelGroup
    from nas.search.nets.plan import ConvBN as ConvBN
    from nas.search.nets.plan import NetworkPlan as NetworkPlan
    from nas.search.nets.plan import block_position as block_position
    from nas.search.nets.plan import layer_kind as layer_kind
    from nas.search.nets.plan import make_divisible as make_divisible
    from nas.search.nets.plan import plan_network as plan_network
    from nas.search.nets.survey import condition_text as condition_text
    from nas.search.nets.survey import fixed_network as fixed_network
    from nas.search.nets.survey import layer_rows as layer_rows
    from nas.search.nets.survey import network_summary as network_summary
    from nas.search.nets.survey import output_shape as output_shape
    from nas.search.nets.survey import parameter_rows as parameter_rows
    from nas.search.nets.survey import probe as probe
    from nas.search.nets.survey import sample as sample
    from nas.search.nets.survey import space_size as space_size

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "build": ["build_model", "build_plan", "count_flops"],
        "channels": ["deployed_plan", "pruned_plan", "transfer"],
        "constraints": ["static_constraints"],
        "plan": [
            "BN_EPSILON",
            "BN_MOMENTUM",
            "BlockPlan",
            "ChannelGroup",
            "ConvBN",
            "HEAD_HIDDEN",
            "LOGITS",
            "NetworkPlan",
            "RESIZE",
            "block_position",
            "layer_kind",
            "make_divisible",
            "plan_network",
        ],
        "survey": [
            "condition_text",
            "fixed_network",
            "layer_rows",
            "network_summary",
            "output_shape",
            "parameter_rows",
            "probe",
            "sample",
            "space_size",
        ],
    },
)

__all__ = [
    "BN_EPSILON",
    "BN_MOMENTUM",
    "HEAD_HIDDEN",
    "LOGITS",
    "RESIZE",
    "BlockPlan",
    "ChannelGroup",
    "ConvBN",
    "NetworkPlan",
    "block_position",
    "build_model",
    "build_plan",
    "condition_text",
    "count_flops",
    "deployed_plan",
    "fixed_network",
    "layer_kind",
    "layer_rows",
    "make_divisible",
    "network_summary",
    "output_shape",
    "parameter_rows",
    "plan_network",
    "probe",
    "pruned_plan",
    "sample",
    "space_size",
    "static_constraints",
    "transfer",
]
