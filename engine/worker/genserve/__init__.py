"""Serving a language model under LoadGen (issue 38): the worker side."""
