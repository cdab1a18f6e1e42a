"""One module per graph node (planner, sketch_writer, coder, compiler, verifier, profiler)."""
