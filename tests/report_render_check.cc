// Checks that a screenshot of the simulator's report is a picture, not a blank page: it must
// decode as a PNG of the expected size, at least 3% of its pixels must not be near-white, and
// it must hold at least 8 distinct colours (the bars of the keys, text, axes). With
// MAX_HEIGHT, the page's content (its last row that is not near-white) must also end above that
// row: taken in a taller window, a page that grew past it fails.
//
//   report_render_check SHOT.png [MAX_HEIGHT]
#include <png.h>

#include <cstdio>
#include <cstdlib>
#include <set>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    std::fprintf(stderr, "usage: report_render_check SHOT.png [MAX_HEIGHT]\n");
    return 2;
  }
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&image, argv[1])) {
    std::fprintf(stderr, "%s: not a PNG: %s\n", argv[1], image.message);
    return 1;
  }
  image.format = PNG_FORMAT_RGB;
  std::vector<png_byte> pixels(PNG_IMAGE_SIZE(image));
  if (!png_image_finish_read(&image, nullptr, pixels.data(), 0, nullptr)) {
    std::fprintf(stderr, "%s: cannot decode: %s\n", argv[1], image.message);
    return 1;
  }
  std::size_t inked = 0, last_inked_row = 0;
  std::set<unsigned> colours;
  const std::size_t count = static_cast<std::size_t>(image.width) * image.height;
  for (std::size_t i = 0; i < count; ++i) {
    const png_byte r = pixels[3 * i], g = pixels[3 * i + 1], b = pixels[3 * i + 2];
    if (r < 235 || g < 235 || b < 235) {
      ++inked;
      last_inked_row = i / image.width;
    }
    colours.insert((unsigned{r} << 16) | (unsigned{g} << 8) | b);
  }
  const double share = static_cast<double>(inked) / static_cast<double>(count);
  std::printf("%ux%u, %.1f%% inked, %zu colours, content ends at row %zu\n", image.width,
              image.height, 100 * share, colours.size(), last_inked_row);
  const bool short_enough = argc < 3 || last_inked_row < std::strtoul(argv[2], nullptr, 10);
  return image.width >= 800 && share >= 0.03 && colours.size() >= 8 && short_enough ? 0 : 1;
}
