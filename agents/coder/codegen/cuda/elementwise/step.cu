{{loads}}
      {{outs}}
      #pragma unroll
      for (int j = 0; j < {{width}}; ++j) {{name}}_f({{call_args}});
      {{stores}}
