"""KiCad schematics read the way KiCad reads them, so grading needs no KiCad.

Public surface: `load_schematic` and `compute_nets` (connectivity with KiCad's net names),
`Netlist` lookups (`nets_by_name`, `net_by_name`, `pin_net`), `read_kicad_netlist` for
kicad-cli's own export, `list_symbols`, and the report and doc-drift helpers in `reports` and
`drift`.
"""

from cbledger.runner.kicad.connectivity import compute_nets
from cbledger.runner.kicad.hierarchy import load_schematic
from cbledger.runner.kicad.model import Schematic
from cbledger.runner.kicad.netlist import Net, Netlist, Node, name_matches

__all__ = [
    "Net",
    "Netlist",
    "Node",
    "Schematic",
    "compute_nets",
    "load_schematic",
    "name_matches",
]
