"""Images and videos as upstream's ``process_image`` and ``process_video`` send them: what the
datasets that carry media (custom_image, sharegpt, the multimodal hub ones) share."""

from __future__ import annotations

from typing import Any

# A string that starts with one of these is sent as written; any other is a local path.
IMAGE_SCHEMES = ("http://", "https://", "file://", "data:image/")
VIDEO_SCHEMES = ("http://", "https://", "file://")


def media_url(location: str, kind: str = "image") -> str:
    """A URL as written, or ``file://`` and the path, as upstream makes one from a string."""
    schemes = IMAGE_SCHEMES if kind == "image" else VIDEO_SCHEMES
    return location if location.startswith(schemes) else f"file://{location}"


def url_part(location: str, kind: str = "image") -> dict[str, Any]:
    """The ``image_url`` (or ``video_url``) part of a URL or a local path."""
    return {"type": f"{kind}_url", f"{kind}_url": {"url": media_url(location, kind)}}


def rgb_image(image: Any) -> Any:
    """vLLM's ``convert_image_mode(image, "RGB")``: transparency over white."""
    from PIL import Image  # the [mm] extra

    if image.mode in ("RGBA", "LA", "PA") or "transparency" in getattr(image, "info", {}):
        rgba = image if image.mode == "RGBA" else image.convert("RGBA")
        rgb = Image.new("RGB", rgba.size, (255, 255, 255))
        rgb.paste(rgba, mask=rgba.split()[3])
        return rgb
    return image if image.mode == "RGB" else image.convert("RGB")
