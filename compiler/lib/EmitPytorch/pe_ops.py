# The pe ops as PyTorch functions, for the modules `stringc --emit=pytorch`
# writes (docs/pytorch.md). stringc embeds this file and copies into each
# module the functions its model uses (each `def` at column 0 up to the
# next, with the functions a `# uses:` line names), so an emitted module
# imports only torch. The semantics are docs/dialect.md's, as in the oracle
# tests/oracle/pe_torch.py (tests/pytorch/test_emit_pytorch.py checks every
# example's module against the runtime and the oracle): activations
# [batch, tokens, width]; heads are contiguous slices of the width; rotary
# pairs are columns (2j, 2j + 1); positions [tokens, axes]; skew parameters
# in the row-major order of torch.triu_indices. Tables without operands are
# computed in float64 and rounded once to `dtype`.


def patch_embed(image, weight, bias, patch):
    """Non-overlapping patch x patch patches in row-major order, each flattened
    (channel, row, column), then linear: [batch, channels, height, width] ->
    [batch, patches, width_out]."""
    batch, channels, height, width = image.shape
    patches = image.reshape(batch, channels, height // patch, patch, width // patch, patch)
    patches = patches.permute(0, 2, 4, 1, 3, 5).reshape(
        batch, (height // patch) * (width // patch), channels * patch * patch)
    return patches @ weight + bias


def class_token(tokens, cls):
    """Prepends `cls` to every sequence: [batch, n, width] -> [batch, n + 1, width]."""
    return torch.cat([cls.expand(tokens.shape[0], 1, cls.shape[-1]), tokens], dim=1)


def cross_entropy(logits, labels, smoothing=0.0):
    """The mean over every position of the cross-entropy of softmax(logits)
    with the labels, smoothed as PyTorch's label_smoothing."""
    classes = logits.shape[-1]
    return F.cross_entropy(logits.reshape(-1, classes), labels.reshape(-1).long(),
                           label_smoothing=smoothing)


def seq_positions(length, special=0, dtype=torch.float32):
    """[special + length, 1]: 0 for the special tokens, then 0 .. length - 1."""
    steps = torch.arange(length, dtype=torch.float64)
    positions = torch.cat([torch.zeros(special, dtype=torch.float64), steps])
    return positions.reshape(-1, 1).to(dtype)


def grid_positions(rows, cols, special=0, dtype=torch.float32):
    """[special + rows * cols, 2]: (0, 0) for the special tokens, then patch
    number n at (column, row) = (n % cols, n // cols)."""
    numbers = torch.arange(rows * cols, dtype=torch.int64)
    columns_rows = torch.stack([numbers % cols, numbers // cols], dim=1).to(torch.float64)
    return torch.cat([torch.zeros(special, 2, dtype=torch.float64), columns_rows]).to(dtype)


def rope_freqs(kind, dim, heads=1, base=10000.0, dtype=torch.float32):
    """The rotary frequencies of `dim` = heads * head_width columns. seq:
    [dim / 2, 1], pair i of each head at base^(-2i / head_width). axial:
    [dim / 2, 2], in each head pair i < head_width / 4 turns with the column
    position at base^(-4i / head_width), pair head_width / 4 + i with the
    row position at the same frequency."""
    head_width = dim // heads
    if kind == "seq":
        index = torch.arange(head_width // 2, dtype=torch.float64)
        return (base ** (-2.0 * index / head_width)).repeat(heads).reshape(-1, 1).to(dtype)
    quarter = head_width // 4
    freqs = base ** (-4.0 * torch.arange(quarter, dtype=torch.float64) / head_width)
    zeros = torch.zeros(quarter, dtype=torch.float64)
    head = torch.cat([torch.stack([freqs, zeros], 1), torch.stack([zeros, freqs], 1)])
    return head.repeat(heads, 1).to(dtype)


def relative_positions(positions):
    """offsets[i, j] = positions[j] - positions[i]: [tokens, axes] -> [tokens, tokens, axes]."""
    return positions.unsqueeze(0) - positions.unsqueeze(1)


def sinusoidal(length, dim, base=10000.0, dtype=torch.float32):
    """table[p, 2i] = sin(p / base^(2i / dim)), table[p, 2i + 1] = cos(...): [length, dim]."""
    steps = torch.arange(length, dtype=torch.float64).unsqueeze(1)
    index = torch.arange((dim + 1) // 2, dtype=torch.float64)
    angles = steps / base ** (2.0 * index / dim)
    table = torch.stack([torch.sin(angles), torch.cos(angles)], dim=-1).reshape(length, -1)
    return table[:, :dim].to(dtype)


def pairs(values):
    """[..., width] -> [..., width / 2, 2]: the rotary pairs."""
    return values.reshape(*values.shape[:-1], values.shape[-1] // 2, 2)


def rope(values, positions, freqs):
    """Rotates pair j of token t by the angle positions[t] . freqs[j]:
    (first, second) -> (first cos - second sin, first sin + second cos)."""
    # uses: pairs
    angles = positions @ freqs.transpose(0, 1)
    cos, sin = torch.cos(angles), torch.sin(angles)
    paired = pairs(values)
    first, second = paired[..., 0], paired[..., 1]
    rotated = torch.stack([first * cos - second * sin, first * sin + second * cos], dim=-1)
    return rotated.reshape(values.shape)


def householder_matrix(angles):
    """I - 2 v v^T with v = (cos, sin) of each angle: [...] -> [..., 2, 2]."""
    unit = torch.stack([torch.cos(angles), torch.sin(angles)], dim=-1)
    eye = torch.eye(2, dtype=angles.dtype, device=angles.device)
    return eye - 2.0 * unit.unsqueeze(-1) * unit.unsqueeze(-2)


def householder(values, positions, freqs_first, freqs_second):
    """Pair j of token t times H(positions[t] . freqs_second[j]) H(positions[t] . freqs_first[j])."""
    # uses: householder_matrix pairs
    first = householder_matrix(positions @ freqs_first.transpose(0, 1))
    second = householder_matrix(positions @ freqs_second.transpose(0, 1))
    rotated = torch.einsum("tjab,...tjb->...tja", second @ first, pairs(values))
    return rotated.reshape(values.shape)


def scatter_skew(params, dim, upper, lower):
    """The [..., dim, dim] matrix with params at the flat indices `upper` and -params at `lower`."""
    flat = params.new_zeros(*params.shape[:-1], dim * dim)
    flat = flat.index_add(-1, upper, params).index_add(-1, lower, -params)
    return flat.reshape(*params.shape[:-1], dim, dim)


def triangle_indices(dim, device):
    """The flat indices (i dim + j, j dim + i) of the pairs i < j, row-major."""
    rows, cols = torch.triu_indices(dim, dim, 1, device=device)
    return rows * dim + cols, cols * dim + rows


def skew(params, dim):
    """The skew-symmetric matrix whose upper triangle, row-major, is params."""
    # uses: scatter_skew triangle_indices
    return scatter_skew(params, dim, *triangle_indices(dim, params.device))


def sparse_skew(params, dim, support):
    """As skew, with parameter m at upper-triangle index support[m]."""
    # uses: scatter_skew triangle_indices
    support = torch.as_tensor(list(support), dtype=torch.int64, device=params.device)
    upper, lower = triangle_indices(dim, params.device)
    return scatter_skew(params, dim, upper[support], lower[support])


def cayley(values, skew_matrix):
    """U values on the last dim, U = (I - S)(I + S)^-1: solves (I + S) z = values, then (I - S) z."""
    dim = skew_matrix.shape[-1]
    eye = torch.eye(dim, dtype=skew_matrix.dtype, device=skew_matrix.device)
    columns = values.reshape(-1, dim).transpose(0, 1)
    solved = torch.linalg.solve(eye + skew_matrix, columns)
    return ((eye - skew_matrix) @ solved).transpose(0, 1).reshape(values.shape)


def generator_exp(coefficients, generators):
    """exp(sum_k coefficients[..., k] generators[k]): [..., K], [K, d, d] -> [..., d, d]."""
    return torch.linalg.matrix_exp(torch.einsum("...k,kij->...ij", coefficients, generators))


def apply_rotation(values, rotations, heads):
    """Head slice h of token t becomes rotations[t] @ values[b, t, h]."""
    batch, tokens, width = values.shape
    per_head = values.reshape(batch, tokens, heads, width // heads)
    return torch.einsum("tij,bthj->bthi", rotations, per_head).reshape(batch, tokens, width)


def commutator_norm(generators):
    """The largest ||L_a L_b - L_b L_a||_F over a < b (0 for one generator);
    the gradient flows through the first largest pair."""
    count = generators.shape[0]
    if count < 2:
        return generators.sum() * 0.0
    first, second = torch.triu_indices(count, count, 1, device=generators.device)
    commutators = generators[first] @ generators[second] - generators[second] @ generators[first]
    norms = torch.linalg.matrix_norm(commutators, ord="fro")
    return norms[torch.argmax(norms.detach())]


def attention_mask(tokens, heads, mask="none", skip_base=0, device=None):
    """Which key each query sees, [heads, tokens, tokens]: none: all; causal:
    keys up to the query; skip: head h sees only key query - (skip_base + h)."""
    query = torch.arange(tokens, device=device).reshape(tokens, 1)
    key = torch.arange(tokens, device=device).reshape(1, tokens)
    if mask == "none":
        return torch.ones(tokens, tokens, dtype=torch.bool, device=device).expand(heads, tokens, tokens)
    if mask == "causal":
        return (key <= query).expand(heads, tokens, tokens)
    head = torch.arange(heads, device=device).reshape(heads, 1, 1)
    return key.unsqueeze(0) == query.unsqueeze(0) - (skip_base + head)


def attention(queries, keys, values, heads, scale=None, mask="none", skip_base=0, relative=None):
    """Multi-head attention: per head, score[i, j] = scale q_i . k_j (or
    q_i . relative[i, j] k_j), out_i = sum_j softmax_j(score | visible) v_j;
    a query that sees no key gives zeros. scale: 1 / sqrt(head width) when None."""
    # uses: attention_mask
    batch, tokens, width = queries.shape
    head_width = width // heads
    if scale is None:
        scale = 1.0 / math.sqrt(head_width)

    def split_heads(tensor):
        return tensor.reshape(batch, tokens, heads, head_width).transpose(1, 2)

    query_heads, key_heads, value_heads = split_heads(queries), split_heads(keys), split_heads(values)
    if relative is None:
        scores = query_heads @ key_heads.transpose(-1, -2)
    else:
        rotated_keys = torch.einsum("ijde,bhje->bhijd", relative, key_heads)
        scores = torch.einsum("bhid,bhijd->bhij", query_heads, rotated_keys)
    visible = attention_mask(tokens, heads, mask, skip_base, device=queries.device)
    scores = (scale * scores).masked_fill(~visible, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1) * visible.to(scores.dtype)
    return (weights @ value_heads).transpose(1, 2).reshape(batch, tokens, width)


def spd_gate(values, gamma):
    """values * exp(gamma), gamma broadcast over the leading dimensions."""
    return values * torch.exp(gamma)


def read_safetensors(path):
    """{name: tensor} of a safetensors file, read without the safetensors package."""
    with open(path, "rb") as file:
        header_size = struct.unpack("<Q", file.read(8))[0]
        header = json.loads(file.read(header_size))
        data = file.read()
    dtypes = {"F32": torch.float32, "F64": torch.float64, "I32": torch.int32, "I64": torch.int64}
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        dtype = dtypes[entry["dtype"]]
        if begin == end:
            tensors[name] = torch.zeros(entry["shape"], dtype=dtype)
        else:
            flat = torch.frombuffer(bytearray(data[begin:end]), dtype=dtype)
            tensors[name] = flat.reshape(entry["shape"])
    return tensors


def load_checkpoint(path, ema=False):
    """The parameters of a checkpoint of `stringrun train` (or of any
    safetensors file with a tensor per parameter) by name, for
    model.load_state_dict; ema=True: the checkpoint's EMA of the weights in
    place of the trainable ones. The optimizer state is left out."""
    # uses: read_safetensors
    try:
        from safetensors.torch import load_file
        tensors = load_file(path)
    except ImportError:
        tensors = read_safetensors(path)
    state = {name: tensor for name, tensor in tensors.items()
             if not name.startswith(("adam.m.", "adam.v.", "sgd.u.", "ema."))}
    if ema:
        if not any(name.startswith("ema.") for name in tensors):
            raise ValueError(f"{path} holds no EMA of the weights")
        for name in state:
            state[name] = tensors.get("ema." + name, state[name])
    return state


def philox_block(counter, key):
    """The four 32-bit words (uint64 tensors) of Philox4x32-10's block at
    `counter` (four integers or int64 tensors, broadcast) under `key` (two
    integers): runtime/include/stringrt/Philox.h, computed exactly in int64."""
    mask = 0xFFFFFFFF
    words = [torch.as_tensor(part, dtype=torch.int64) & mask for part in counter]
    key_low, key_high = int(key[0]) & mask, int(key[1]) & mask
    for round_index in range(10):
        if round_index > 0:
            key_low, key_high = (key_low + 0x9E3779B9) & mask, (key_high + 0xBB67AE85) & mask
        # Products of two 32-bit numbers, split into 16-bit halves so that int64 never overflows.
        high_first, low_first = multiply_high_low(words[0], 0xD2511F53)
        high_second, low_second = multiply_high_low(words[2], 0xCD9E8D57)
        words = [high_second ^ words[1] ^ key_low, low_second,
                 high_first ^ words[3] ^ key_high, low_first]
    return words


def multiply_high_low(value, factor):
    """(high, low) 32-bit words of value * factor for 32-bit value and factor (int64 tensors)."""
    mask = 0xFFFFFFFF
    value_low, value_high = value & 0xFFFF, value >> 16
    factor_low, factor_high = factor & 0xFFFF, factor >> 16
    low_low = value_low * factor_low
    middle = value_high * factor_low + (low_low >> 16)
    middle_low, middle_high = middle & 0xFFFF, middle >> 16
    middle_low = middle_low + value_low * factor_high
    high = value_high * factor_high + middle_high + (middle_low >> 16)
    low = ((middle_low & 0xFFFF) << 16) | (low_low & 0xFFFF)
    return high & mask, low & mask


def dropout(values, rate, stream, per_sample=False, key=(0, 0, 0)):
    """values / (1 - rate) where the runtime's mask keeps, 0 where it drops: the
    mask of runtime/include/stringrt/DropoutMask.h at key = (seed, step, first
    sample), per element (or per sample with per_sample) of the Philox words."""
    # uses: philox_block multiply_high_low
    seed, step, first = key
    batch = values.shape[0]
    per_row = math.prod(values.shape[1:])
    samples = torch.arange(first, first + batch, dtype=torch.int64).reshape(batch, 1)
    elements = torch.zeros(1, 1 if per_sample else per_row, dtype=torch.int64)
    if not per_sample:
        elements[0] = torch.arange(per_row, dtype=torch.int64)
    words = philox_block((elements // 4, samples, step, 0x80000000 | stream), (seed, seed >> 32))
    word = torch.stack(torch.broadcast_tensors(*words)).gather(
        0, (elements % 4).expand(batch, -1).unsqueeze(0)).squeeze(0)
    keep = (word >> 8).to(torch.float64) / 16777216.0 >= rate
    keep = keep.expand(batch, per_row).reshape(values.shape).to(values.device)
    factor = torch.tensor(1.0 / (1.0 - rate), dtype=torch.float64).to(values.dtype)
    return torch.where(keep, values * factor, torch.zeros((), dtype=values.dtype, device=values.device))
