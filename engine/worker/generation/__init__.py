"""The generation body of a worker and its runtimes (imported only in a worker)."""
