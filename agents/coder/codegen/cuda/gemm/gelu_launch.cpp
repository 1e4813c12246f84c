
  {{name}}_gelu_launch(y.data_ptr(), y.numel(), stream);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
