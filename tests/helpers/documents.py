"""Valid documents and images for estimate tests and benches, built with the libraries that read them."""

import base64
import io

import pypdf
from PIL import Image


def blank_pdf_base64(pages: int) -> str:
    """A valid PDF of ``pages`` blank US-letter pages, base64."""
    writer = pypdf.PdfWriter()
    for _ in range(pages):
        writer.add_blank_page(width=612, height=792)
    out = io.BytesIO()
    writer.write(out)
    return base64.b64encode(out.getvalue()).decode()


def png_base64(width: int, height: int, mode: str = "RGB") -> str:
    """A valid PNG of ``width`` × ``height`` pixels (``mode`` as Pillow names it), base64."""
    out = io.BytesIO()
    Image.new(mode, (width, height)).save(out, format="PNG")
    return base64.b64encode(out.getvalue()).decode()
