"""What people and machines read: markdown pages, JSON documents and figures, and the report folder that holds them.

Everything here renders data it is given (JSON-ready documents, histograms, p-values) and knows nothing of how
they were drawn; the runners call it.
"""
