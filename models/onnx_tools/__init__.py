"""What the real models' stage code shares: onnxruntime sessions as a plan places them
(`sessions`), 1-D convolutions rewritten so a graph gives the same bits at every thread count
(`conv_layout`), and a cache of rewritten graphs (`graph_cache`). Imports are lazy: nothing here
loads onnxruntime or onnx until a session or a rewrite is asked for."""
