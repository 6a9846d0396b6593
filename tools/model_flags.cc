#include "tools/model_flags.h"

namespace lookalike {

void DeclareModelFlags(FlagGroup* g, ModelOptions* o) {
  const ModelOptions d;  // --help shows a default-constructed struct's values
  g->Value("clusters", &o->codebook.num_clusters, d.codebook.num_clusters,
           "K, number of visual words of the codebook");
  g->Value("max-side", &o->encoding.max_side, d.encoding.max_side,
           "downscale images so the longest side is at most PX pixels (0 = never)");
  g->Text("descriptor", d.encoding.extractor.type, "rootsift | sift",
          [o](const std::string& v) { o->encoding.extractor.type = v; });
  g->Number("contrast-threshold", &o->encoding.extractor.contrast_threshold,
            d.encoding.extractor.contrast_threshold,
            "SIFT detector contrast threshold (lower = more keypoints)");
  g->Value("max-features", &o->encoding.extractor.max_features, d.encoding.extractor.max_features,
           "keep at most N strongest keypoints per image (0 = all)");
  g->Value("min-keypoints", &o->encoding.extractor.min_keypoints,
           d.encoding.extractor.min_keypoints,
           "re-detect an image with fewer keypoints at lower contrast thresholds (0 = off)");
  g->Number("power", &o->encoding.vlad.power_alpha, d.encoding.vlad.power_alpha,
            "VLAD power-normalisation exponent in (0, 1] (0.5 = signed square root, 1 = off)");
  g->OnOff("intra-norm", &o->encoding.vlad.intra_normalize, d.encoding.vlad.intra_normalize,
           "VLAD intra-normalisation on|off");
  g->OnOff("residual-norm", &o->encoding.vlad.residual_normalize,
           d.encoding.vlad.residual_normalize, "L2-normalise each residual before summing, on|off");
  g->Value("train-images", &o->train_images, d.train_images,
           "images sampled (seeded) to learn the codebook");
  g->Value("descriptor-bytes", &o->quantizer.bytes, d.quantizer.bytes,
           "bytes kept per local descriptor (product quantisation; must divide 128); 0 = "
           "the older 8x larger layout (schema 2)");
  g->Value("pca-dim", &o->projection.out_dim, d.projection.out_dim,
           "PCA of VLAD vectors learned from the training images: components kept for "
           "search (0 = off; capped at training images - 1)");
  g->Value("pca-min-images", &o->projection.min_images, d.projection.min_images,
           "learn the PCA only if at least N training images have features (0 = always); "
           "smaller collections search full VLAD vectors until an index run brings them to N");
  g->OnOff("whiten", &o->projection.whiten, d.projection.whiten, "PCA-whitening on|off");
  g->Number("pca-regularization", &o->projection.eigen_regularization,
            d.projection.eigen_regularization,
            "whitening divides by sqrt(eigenvalue + R x mean eigenvalue)");
  g->Number("pca-power", &o->projection.power_alpha, d.projection.power_alpha,
            "signed power of the PCA components before L2, in (0, 1] (1 = off)");
  g->Value("pca-bits", &o->projection.component_bits, d.projection.component_bits,
           "bits per stored PCA matrix value: 0 (automatic: 1 below 224 images, 2 below 448, "
           "else 4 at the default sizes, learned again with more bits as the collection "
           "grows), 4 (a 16-level code per value), 2 or 1 (a quarter or an eighth of "
           "float16's size), 16 (float16) or 32 (float32)");
  g->Value("subwords", &o->words.fine_per_word, d.words.fine_per_word,
           "sub-words per codebook word of the word index's vocabulary (K x N words; 1..256)");
  g->Value("iterations", &o->codebook.num_iterations, d.codebook.num_iterations,
           "k-means iterations");
  g->Value("seed", &o->codebook.seed, d.codebook.seed, "seed of the training sample and k-means");
}

}  // namespace lookalike
