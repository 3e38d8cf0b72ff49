#pragma once
// A minimal PNG reader for tests of rendered screenshots: 8-bit greyscale, RGB or RGBA,
// non-interlaced (what Chromium writes). Inflate follows RFC 1951 in the manner of zlib's
// `puff` (canonical Huffman codes decoded bit by bit): slow but short, and the screenshots are
// small. Throws `std::runtime_error` on anything it does not understand.

#include <array>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

namespace pipeplan::testing {

/// A decoded image: `channels` bytes per pixel, rows top to bottom.
struct Image {
  int width = 0;
  int height = 0;
  int channels = 0;
  std::vector<std::uint8_t> pixels;

  /// Channel `c` of pixel (x, y).
  [[nodiscard]] std::uint8_t at(int x, int y, int c) const {
    return pixels[(static_cast<std::size_t>(y) * static_cast<std::size_t>(width) +
                   static_cast<std::size_t>(x)) *
                      static_cast<std::size_t>(channels) +
                  static_cast<std::size_t>(c)];
  }
};

namespace png_detail {

inline std::uint32_t big_endian(const std::string& bytes, std::size_t at) {
  if (at + 4 > bytes.size()) throw std::runtime_error("PNG: truncated");
  return (static_cast<std::uint32_t>(static_cast<std::uint8_t>(bytes[at])) << 24) |
         (static_cast<std::uint32_t>(static_cast<std::uint8_t>(bytes[at + 1])) << 16) |
         (static_cast<std::uint32_t>(static_cast<std::uint8_t>(bytes[at + 2])) << 8) |
         static_cast<std::uint32_t>(static_cast<std::uint8_t>(bytes[at + 3]));
}

class Inflater {
 public:
  explicit Inflater(const std::vector<std::uint8_t>& in) : in_(in) {}

  std::vector<std::uint8_t> run() {
    bool last = false;
    while (!last) {
      last = bits(1) == 1;
      const int type = bits(2);
      if (type == 0) {
        stored();
      } else if (type == 1) {
        fixed();
      } else if (type == 2) {
        dynamic();
      } else {
        throw std::runtime_error("inflate: bad block type");
      }
    }
    return std::move(out_);
  }

 private:
  struct Huffman {
    std::array<int, 16> count{};
    std::vector<int> symbol;
  };

  int bits(int need) {
    long value = bit_buffer_;
    while (bit_count_ < need) {
      if (at_ >= in_.size()) throw std::runtime_error("inflate: out of input");
      value |= static_cast<long>(in_[at_++]) << bit_count_;
      bit_count_ += 8;
    }
    bit_buffer_ = value >> need;
    bit_count_ -= need;
    return static_cast<int>(value & ((1L << need) - 1));
  }

  void stored() {
    bit_buffer_ = 0;
    bit_count_ = 0;
    if (at_ + 4 > in_.size()) throw std::runtime_error("inflate: truncated stored block");
    const unsigned length = in_[at_] | (static_cast<unsigned>(in_[at_ + 1]) << 8);
    const unsigned check = in_[at_ + 2] | (static_cast<unsigned>(in_[at_ + 3]) << 8);
    if (length != (~check & 0xFFFFU)) throw std::runtime_error("inflate: bad stored length");
    at_ += 4;
    if (at_ + length > in_.size()) throw std::runtime_error("inflate: truncated stored block");
    out_.insert(out_.end(), in_.begin() + static_cast<long>(at_),
                in_.begin() + static_cast<long>(at_ + length));
    at_ += length;
  }

  static Huffman build(const int* lengths, int n) {
    Huffman h;
    for (int i = 0; i < n; ++i) ++h.count[static_cast<std::size_t>(lengths[i])];
    std::array<int, 16> offset{};
    for (int len = 1; len < 15; ++len) {
      offset[static_cast<std::size_t>(len) + 1] =
          offset[static_cast<std::size_t>(len)] + h.count[static_cast<std::size_t>(len)];
    }
    h.symbol.assign(static_cast<std::size_t>(n), 0);
    for (int i = 0; i < n; ++i) {
      if (lengths[i] != 0) {
        h.symbol[static_cast<std::size_t>(offset[static_cast<std::size_t>(lengths[i])]++)] = i;
      }
    }
    return h;
  }

  int decode(const Huffman& h) {
    int code = 0, first = 0, index = 0;
    for (int len = 1; len < 16; ++len) {
      code |= bits(1);
      const int count = h.count[static_cast<std::size_t>(len)];
      if (code - count < first) return h.symbol[static_cast<std::size_t>(index + (code - first))];
      index += count;
      first += count;
      first <<= 1;
      code <<= 1;
    }
    throw std::runtime_error("inflate: bad code");
  }

  void codes(const Huffman& lengths, const Huffman& distances) {
    static const int kBase[] = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                                31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
    static const int kExtra[] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
    static const int kDistBase[] = {1,    2,    3,    4,    5,    7,    9,    13,    17,    25,
                                    33,   49,   65,   97,   129,  193,  257,  385,   513,   769,
                                    1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
    static const int kDistExtra[] = {0, 0, 0, 0, 1, 1, 2, 2,  3,  3,  4,  4,  5,  5,  6,
                                     6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};
    for (;;) {
      int symbol = decode(lengths);
      if (symbol < 256) {
        out_.push_back(static_cast<std::uint8_t>(symbol));
      } else if (symbol == 256) {
        return;
      } else {
        symbol -= 257;
        if (symbol >= 29) throw std::runtime_error("inflate: bad length symbol");
        const int length = kBase[symbol] + bits(kExtra[symbol]);
        const int d = decode(distances);
        if (d >= 30) throw std::runtime_error("inflate: bad distance symbol");
        const std::size_t distance = static_cast<std::size_t>(kDistBase[d] + bits(kDistExtra[d]));
        if (distance > out_.size()) throw std::runtime_error("inflate: distance too far back");
        for (int k = 0; k < length; ++k) out_.push_back(out_[out_.size() - distance]);
      }
    }
  }

  void fixed() {
    int lengths[288 + 30];
    for (int i = 0; i < 144; ++i) lengths[i] = 8;
    for (int i = 144; i < 256; ++i) lengths[i] = 9;
    for (int i = 256; i < 280; ++i) lengths[i] = 7;
    for (int i = 280; i < 288; ++i) lengths[i] = 8;
    for (int i = 0; i < 30; ++i) lengths[288 + i] = 5;
    codes(build(lengths, 288), build(lengths + 288, 30));
  }

  void dynamic() {
    static const int kOrder[19] = {16, 17, 18, 0, 8,  7, 9,  6, 10, 5,
                                   11, 4,  12, 3, 13, 2, 14, 1, 15};
    const int nlen = bits(5) + 257, ndist = bits(5) + 1, ncode = bits(4) + 4;
    int lengths[320] = {};
    for (int i = 0; i < ncode; ++i) lengths[kOrder[i]] = bits(3);
    const Huffman code_lengths = build(lengths, 19);
    int index = 0;
    while (index < nlen + ndist) {
      int symbol = decode(code_lengths);
      if (symbol < 16) {
        lengths[index++] = symbol;
        continue;
      }
      int value = 0, repeat = 0;
      if (symbol == 16) {
        if (index == 0) throw std::runtime_error("inflate: repeat with no previous length");
        value = lengths[index - 1];
        repeat = 3 + bits(2);
      } else if (symbol == 17) {
        repeat = 3 + bits(3);
      } else {
        repeat = 11 + bits(7);
      }
      if (index + repeat > nlen + ndist) throw std::runtime_error("inflate: too many lengths");
      while (repeat-- > 0) lengths[index++] = value;
    }
    codes(build(lengths, nlen), build(lengths + nlen, ndist));
  }

  const std::vector<std::uint8_t>& in_;
  std::size_t at_ = 0;
  long bit_buffer_ = 0;
  int bit_count_ = 0;
  std::vector<std::uint8_t> out_;
};

}  // namespace png_detail

/// Width and height from the IHDR chunk, after checking the PNG signature.
inline std::pair<int, int> png_size(const std::string& bytes) {
  if (bytes.size() < 24 || bytes.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0 ||
      bytes.compare(12, 4, "IHDR") != 0) {
    throw std::runtime_error("not a PNG file");
  }
  return {static_cast<int>(png_detail::big_endian(bytes, 16)),
          static_cast<int>(png_detail::big_endian(bytes, 20))};
}

/// Decodes a PNG: 8-bit greyscale (0), RGB (2), grey-alpha (4) or RGBA (6), not interlaced.
inline Image decode_png(const std::string& bytes) {
  const auto [width, height] = png_size(bytes);
  const auto depth = static_cast<std::uint8_t>(bytes[24]);
  const auto colour = static_cast<std::uint8_t>(bytes[25]);
  const auto interlace = static_cast<std::uint8_t>(bytes[28]);
  int channels = 0;
  switch (colour) {
    case 0:
      channels = 1;
      break;
    case 2:
      channels = 3;
      break;
    case 4:
      channels = 2;
      break;
    case 6:
      channels = 4;
      break;
    default:
      throw std::runtime_error("PNG: unsupported colour type " + std::to_string(colour));
  }
  if (depth != 8 || interlace != 0) {
    throw std::runtime_error("PNG: only 8-bit, non-interlaced images");
  }
  std::vector<std::uint8_t> compressed;
  for (std::size_t at = 8; at + 8 <= bytes.size();) {
    const std::uint32_t length = png_detail::big_endian(bytes, at);
    const std::string type = bytes.substr(at + 4, 4);
    if (at + 12 + length > bytes.size()) throw std::runtime_error("PNG: truncated chunk " + type);
    if (type == "IDAT") {
      compressed.insert(compressed.end(), bytes.begin() + static_cast<long>(at + 8),
                        bytes.begin() + static_cast<long>(at + 8 + length));
    }
    if (type == "IEND") break;
    at += 12 + length;
  }
  if (compressed.size() < 2 || (compressed[0] & 0x0F) != 8) {
    throw std::runtime_error("PNG: not a zlib stream");
  }
  const std::vector<std::uint8_t> deflated(compressed.begin() + 2, compressed.end());
  const std::vector<std::uint8_t> raw = png_detail::Inflater(deflated).run();
  const std::size_t stride = static_cast<std::size_t>(width) * static_cast<std::size_t>(channels);
  if (raw.size() < static_cast<std::size_t>(height) * (stride + 1)) {
    throw std::runtime_error("PNG: too little image data");
  }
  Image image{width, height, channels,
              std::vector<std::uint8_t>(static_cast<std::size_t>(height) * stride)};
  const auto bpp = static_cast<std::size_t>(channels);
  for (std::size_t y = 0; y < static_cast<std::size_t>(height); ++y) {
    const std::uint8_t filter = raw[y * (stride + 1)];
    const std::uint8_t* line = &raw[y * (stride + 1) + 1];
    std::uint8_t* row = &image.pixels[y * stride];
    const std::uint8_t* up = y > 0 ? &image.pixels[(y - 1) * stride] : nullptr;
    for (std::size_t i = 0; i < stride; ++i) {
      const int a = i >= bpp ? row[i - bpp] : 0;
      const int b = up ? up[i] : 0;
      const int c = (up && i >= bpp) ? up[i - bpp] : 0;
      int predicted = 0;
      switch (filter) {
        case 0:
          predicted = 0;
          break;
        case 1:
          predicted = a;
          break;
        case 2:
          predicted = b;
          break;
        case 3:
          predicted = (a + b) / 2;
          break;
        case 4: {
          const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
          predicted = (pa <= pb && pa <= pc) ? a : (pb <= pc ? b : c);
          break;
        }
        default:
          throw std::runtime_error("PNG: bad filter type");
      }
      row[i] = static_cast<std::uint8_t>((line[i] + predicted) & 0xFF);
    }
  }
  return image;
}

}  // namespace pipeplan::testing
