"""GNU Radio / UHD: the only room that imports gnuradio. Submodules import it; this package does not,
so that pure tools (replay of SigMF recordings) import without GNU Radio."""
