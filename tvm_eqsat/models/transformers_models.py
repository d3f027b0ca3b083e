"""Models built from transformers' configurations (random weights, no downloads):
BERT, ResNet-50, MobileNet-v2, ViT-B/16."""

from __future__ import annotations

from .common import Model, import_torch, seeded, trained_bn


def bert(hidden: int = 64, layers: int = 2, heads: int = 2, seq: int = 16, seed: int = 0) -> Model:
    """transformers BertModel from a config; input ids and an explicit attention mask."""
    torch = seeded(seed)
    from transformers import BertConfig, BertModel

    config = BertConfig(
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=4 * hidden,
        vocab_size=1000,
        max_position_embeddings=max(512, seq),
    )
    model = BertModel(config)
    ids = torch.randint(0, 1000, (1, seq))
    mask = torch.ones(1, seq, dtype=torch.int64)
    mod = import_torch(model, (ids, mask))
    return Model(f"bert-h{hidden}-l{layers}-s{seq}", mod, [ids.numpy(), mask.numpy()], model)


def bert_base(seq: int = 128, small: bool = False) -> Model:
    """BERT-base (12 layers, hidden 768); ``small``: the 2-layer, hidden-64 :func:`bert`."""
    if small:
        return bert()
    return bert(hidden=768, layers=12, heads=12, seq=seq)


def resnet50(size: int | None = None, seed: int = 0, small: bool = False) -> Model:
    """transformers ResNetModel with the ResNet-50 configuration (224 px).

    ``small``: one bottleneck per stage at half the widths, 64 px.
    """
    torch = seeded(seed)
    from transformers import ResNetConfig, ResNetModel

    if small:
        config = ResNetConfig(embedding_size=32, hidden_sizes=[128, 256, 512, 1024], depths=[1, 1, 1, 1])
    else:
        config = ResNetConfig()
    size = size or (64 if small else 224)
    model = trained_bn(ResNetModel(config))
    x = torch.randn(1, 3, size, size)
    name = f"resnet50{'-small' if small else ''}-{size}"
    return Model(name, import_torch(model, (x,)), [x.numpy()], model)


def mobilenet_v2(size: int | None = None, seed: int = 0, small: bool = False) -> Model:
    """transformers MobileNetV2Model, width 1.0, 224 px; ``small``: width 0.35, 64 px.

    ``tf_padding=False`` gives the published (torchvision) symmetric padding instead of
    TensorFlow's asymmetric SAME padding, which would add an explicit pad before every
    strided depthwise conv.
    """
    torch = seeded(seed)
    from transformers import MobileNetV2Config, MobileNetV2Model

    size = size or (64 if small else 224)
    config = MobileNetV2Config(depth_multiplier=0.35 if small else 1.0, image_size=size, tf_padding=False)
    model = trained_bn(MobileNetV2Model(config))
    x = torch.randn(1, 3, size, size)
    name = f"mobilenet-v2{'-small' if small else ''}-{size}"
    return Model(name, import_torch(model, (x,)), [x.numpy()], model)


def vit_b16(size: int | None = None, seed: int = 0, small: bool = False) -> Model:
    """transformers ViTModel, ViT-B/16 (12 layers, hidden 768, 224 px, patch 16).

    ``small``: 2 layers, hidden 64, 2 heads, 32 px with patch 8 (16 tokens).
    Eager attention: plain matmul/softmax in Relax; the SDPA default imports with an extra
    mask-and-NaN guard (equal, logical_not, max, where) around every softmax.
    """
    torch = seeded(seed)
    from transformers import ViTConfig, ViTModel

    if small:
        size = size or 32
        config = ViTConfig(
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=256,
            image_size=size,
            patch_size=8,
            attn_implementation="eager",
        )
    else:
        size = size or 224
        config = ViTConfig(image_size=size, attn_implementation="eager")
    model = ViTModel(config)
    x = torch.randn(1, 3, size, size)
    name = f"vit-b16{'-small' if small else ''}-{size}"
    return Model(name, import_torch(model, (x,)), [x.numpy()], model)
