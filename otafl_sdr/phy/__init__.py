"""Pure-numpy physical layer (no GNU Radio): packing reals into complex symbols, Zadoff-Chu preamble,
root-raised-cosine pulse shaping, framing with pilots, the pre-equalised reference design, and the
burst modem (timing, CFO, phase tracking). The GNU Radio flowgraphs in ``otafl_sdr.radio`` and the
offline SigMF replay both use these pieces."""
from otafl_sdr.phy.modem import DemodResult, Modem
from otafl_sdr.phy.packing import pack_reals, unpack_reals

__all__ = ["DemodResult", "Modem", "pack_reals", "unpack_reals"]
