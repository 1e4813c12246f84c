  // ---- group_norm statistics (BatchStatsSpec.groups): [2, N * groups] ----
  const int64_t groups = {{groups}};
  if (g.M == 0 || g.C == 0)  // empty: empty or zero statistics, as torch gives
    return at::zeros({2, g.N * groups}, in_0.options().dtype(at::kFloat));
  {  // group_norm statistics: [2, N * groups]
    TORCH_CHECK(g.C % groups == 0, "{{name}}: ", ks_str(g.C), " channels in ", ks_str(groups), " groups");
    // (a group of one value is valid, as torch's group_norm has it: variance 0)
    // channels-last: per-sample parts merged per group (a part per sample at least: the grid's y
    // holds N of them; more samples take the copy below)
    if (rows && g.S > 1 && g.sS == g.C && g.sN == g.S * g.C && g.N <= 65535) {
      g.G = groups;
      g.cg = g.C / groups;
    } else {  // each (n, group) one contiguous row: the [1, N * groups, C / groups * S] view, a channel a group
      if (!x.is_contiguous()) x = x.contiguous();
      rows = 0;
      g.C = g.N * groups;
      g.S = g.S * (in_0.size(1) / groups);
      g.N = 1;
      g.sS = 1;
      g.sC = g.S;
      g.sN = g.C * g.S;
      g.M = g.S;
      g.fS = KsFastDiv{};
      if (g.M <= (int64_t)0xffffffffLL) g.fS = ks_fastdiv_make(g.S);
    }
  }
