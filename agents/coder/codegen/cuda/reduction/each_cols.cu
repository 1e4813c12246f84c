#pragma unroll 4
    for (int r = ty; r < Ri; r += TY) if (live) { {{body}} }
