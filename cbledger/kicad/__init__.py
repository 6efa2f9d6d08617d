"""KiCad schematics read the way KiCad reads them, so grading needs no KiCad.

`load_schematic` reads a design (root file and every sheet below it); `compute_nets` gives its
nets with KiCad's names; `Netlist` answers the lookups assertions make (`nets_by_name`,
`net_by_name`, `pin_net`). Around them: kicad-cli's own netlist (`read_kicad_netlist`) and the
comparison with it, the symbol list, ERC/DRC report counting (`reports`) and doc drift
(`drift`). docs/KICAD.md states the rules.
"""

from cbledger.kicad.compare import Comparison, compare_netlists
from cbledger.kicad.connectivity import compute_nets
from cbledger.kicad.hierarchy import find_root_schematics, load_schematic
from cbledger.kicad.kicad_net import read_kicad_netlist
from cbledger.kicad.model import Schematic
from cbledger.kicad.netlist import Net, Netlist, Node, name_matches
from cbledger.kicad.symbols import SymbolRecord, find_symbol, list_symbols

__all__ = [
    "Comparison",
    "Net",
    "Netlist",
    "Node",
    "Schematic",
    "SymbolRecord",
    "compare_netlists",
    "compute_nets",
    "find_root_schematics",
    "find_symbol",
    "list_symbols",
    "load_schematic",
    "name_matches",
    "read_kicad_netlist",
]
