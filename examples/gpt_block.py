"""A GPT-2 transformer block as minGPT writes it: pre-norm causal self-attention written out
(matmul, scale, masked_fill with a tril buffer, softmax, matmul) and an MLP with the tanh GELU,
each with a residual add."""

import math

import torch
import torch.nn as nn

BATCH = 8
SEQ = 1024
HEADS = 16
HEAD_DIM = 64  # the embedding is HEADS * HEAD_DIM (1024), so shrunk constants keep it divisible


class NewGELU(nn.Module):
    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class CausalSelfAttention(nn.Module):
    def __init__(self, embd: int, heads: int, max_seq: int):
        super().__init__()
        self.c_attn = nn.Linear(embd, 3 * embd)
        self.c_proj = nn.Linear(embd, embd)
        self.register_buffer("bias", torch.tril(torch.ones(max_seq, max_seq)).view(1, 1, max_seq, max_seq))
        self.heads, self.embd = heads, embd

    def forward(self, x):
        b, t, c = x.size()
        q, k, v = self.c_attn(x).split(self.embd, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
        att = torch.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.c_proj(y)


class Model(nn.Module):
    def __init__(self, embd: int, heads: int, max_seq: int):
        super().__init__()
        self.ln_1 = nn.LayerNorm(embd)
        self.attn = CausalSelfAttention(embd, heads, max_seq)
        self.ln_2 = nn.LayerNorm(embd)
        self.fc = nn.Linear(embd, 4 * embd)
        self.proj = nn.Linear(4 * embd, embd)
        self.act = NewGELU()

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.proj(self.act(self.fc(self.ln_2(x))))


def get_inputs():
    return [torch.randn(BATCH, SEQ, HEADS * HEAD_DIM)]


def get_init_inputs():
    return [HEADS * HEAD_DIM, HEADS, SEQ]
