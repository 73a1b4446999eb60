"""zyx-cudnn: cuDNN matmul programs for zyx-cuda devices."""
