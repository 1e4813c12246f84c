const void* mask_ptr = nullptr;
  const int64_t sm0 = 0, sm1 = 0, sm2 = 0;
