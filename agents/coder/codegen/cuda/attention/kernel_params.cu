    const {{q_t}}* __restrict__ q, const {{k_t}}* __restrict__ k, const {{v_t}}* __restrict__ v,
    const {{mask_t}}* __restrict__ mask, {{out_t}}* __restrict__ out, const int64_t Lq, const int64_t Lk,
    const int64_t tiles_m, const int64_t heads, const int64_t sqb, const int64_t sqh, const int64_t sq1,
    const int64_t skb, const int64_t skh, const int64_t sk1, const int64_t svb, const int64_t svh, const int64_t sv1,
    const int64_t sm0, const int64_t sm1, const int64_t sm2,
    const unsigned char* __restrict__ live, const int64_t live_n, const float q_scale
