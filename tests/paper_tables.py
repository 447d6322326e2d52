"""Numbers transcribed from the paper (../shared/paper/battus.tex), table by table.

These are the targets the tests check our computed values against; nothing
here is fed to the engine.
"""

SI = ["ba-si", "er-si", "oregon2-si", "prost-si", "farmers-si", "pol-si"]
SIR = ["ba-sir", "er-sir", "oregon2-sir", "prost-sir", "covid-sir", "heb-sir"]
DATASETS = SI + SIR

# tab:datasets: n, |E| (arcs for directed graphs, edges otherwise), T
DATASET_STATS = {
    "ba": (1000, 3984, 10), "er": (1000, 3987, 10), "oregon2": (11461, 32730, 15),
    "prost": (15810, 38540, 15), "farmers": (82, 230, 16), "pol": (18470, 48053, 40),
    "covid": (344, 2044, 10), "heb": (3521, 18064, 9),
}

# tab:canonical-quality, rows Battus-Z and Battus: (F1, NRMSE)
BATTUS_Z = {
    "ba-si": (.9014, .0937), "er-si": (.9002, .0963), "oregon2-si": (.8953, .0947),
    "prost-si": (.9015, .0950), "farmers-si": (.9016, .0921), "pol-si": (.8781, .1026),
    "ba-sir": (.8666, .0969), "er-sir": (.8675, .0957), "oregon2-sir": (.8702, .1027),
    "prost-sir": (.8709, .1023), "covid-sir": (.7801, .1334), "heb-sir": (.8375, .1070),
}
BATTUS = {
    "ba-si": (.8967, .0950), "er-si": (.9011, .0921), "oregon2-si": (.8884, .0971),
    "prost-si": (.9000, .0933), "farmers-si": (.9071, .0853), "pol-si": (.8807, .0981),
    "ba-sir": (.8567, .1612), "er-sir": (.8644, .1664), "oregon2-sir": (.8673, .1051),
    "prost-sir": (.8740, .0996), "covid-sir": (.7945, .4036), "heb-sir": (.8450, .1134),
}
BATTUS_Z_MEAN = (.8726, .1010)
BATTUS_MEAN = (.8730, .1342)
HERMES_GATE = (.8692, .1483)  # published HERMES means: F1 >= .8692 and NRMSE <= .1483 pass

# tab:unobserved-quality (means, observed frames dropped)
UNOBSERVED_MEAN = {"battus-z": (.8431, .1181), "battus": (.8440, .1476)}

# tab:ablation (means)
ABLATION = {
    "battus": (.8730, .1342),
    "battus-threshold": (.8730, .1003),
    "battus-threshold-noreset": (.8729, .1003),
    "battus-z": (.8726, .1010),
    "battus-z-nobackward": (.8171, .1540),
    "battus-z-map": (.8653, .1152),
    "battus-z-noprojection": (.8726, .1010),
}

# tab:feasibility-sensitivity Panel A: causal-violation rate (%): truth, Battus, Battus-Z
CAUSAL = {
    "ba-si": (0.00, 1.28, 1.50), "er-si": (0.00, 22.59, 40.13), "oregon2-si": (0.00, 6.43, 4.91),
    "prost-si": (0.00, 7.02, 5.38), "farmers-si": (18.92, 21.33, 20.00), "pol-si": (3.51, 9.15, 9.19),
    "ba-sir": (0.00, 2.40, 5.14), "er-sir": (0.00, 28.42, 25.54), "oregon2-sir": (0.00, 6.88, 5.72),
    "prost-sir": (0.00, 8.44, 9.62), "covid-sir": (3.42, 67.54, 40.35), "heb-sir": (40.65, 6.54, 6.79),
}
CAUSAL_EVENT_WEIGHTED = {"si": (1.36, 7.97, 7.50), "sir": (2.97, 9.00, 8.77)}

# Panel B: Battus-Z rate grid, (beta_i, beta_r) -> {dataset: (F1, NRMSE)}
RATE_GRID = {
    (.05, .05): {"ba-sir": (.8462, .1091), "prost-sir": (.8700, .1038), "covid-sir": (.7772, .1389)},
    (.05, .10): {"ba-sir": (.8533, .1077), "prost-sir": (.8688, .1060), "covid-sir": (.7820, .1341)},
    (.05, .20): {"ba-sir": (.8520, .1088), "prost-sir": (.8667, .1110), "covid-sir": (.7831, .1350)},
    (.10, .05): {"ba-sir": (.8558, .1017), "prost-sir": (.8707, .1018), "covid-sir": (.7727, .1436)},
    (.10, .10): {"ba-sir": (.8666, .0969), "prost-sir": (.8709, .1023), "covid-sir": (.7801, .1334)},
    (.10, .20): {"ba-sir": (.8588, .1030), "prost-sir": (.8707, .1073), "covid-sir": (.7873, .1276)},
    (.20, .05): {"ba-sir": (.8388, .1191), "prost-sir": (.8638, .1080), "covid-sir": (.7569, .1552)},
    (.20, .10): {"ba-sir": (.8528, .1107), "prost-sir": (.8647, .1071), "covid-sir": (.7640, .1477)},
    (.20, .20): {"ba-sir": (.8586, .1031), "prost-sir": (.8667, .1082), "covid-sir": (.7824, .1319)},
}

# tab:tau-sensitivity: tau -> per-dataset F1 (Panel A) and NRMSE (Panel B), dataset order DATASETS
TAUS = [.50, .55, .60, .65, .70, .75, .80]
TAU_F1 = {
    "ba-si": [.8924, .8969, .9000, .9014, .9017, .9024, .8948],
    "er-si": [.8906, .8954, .8988, .9002, .9022, .8989, .8931],
    "oregon2-si": [.8811, .8891, .8928, .8953, .8952, .8926, .8861],
    "prost-si": [.8956, .8990, .9012, .9015, .9006, .8964, .8917],
    "farmers-si": [.8870, .8901, .8939, .9016, .9062, .9061, .9010],
    "pol-si": [.8701, .8736, .8766, .8781, .8772, .8740, .8671],
    "ba-sir": [.8602, .8635, .8661, .8666, .8557, .8430, .8279],
    "er-sir": [.8651, .8668, .8680, .8675, .8508, .8398, .8260],
    "oregon2-sir": [.8674, .8712, .8728, .8702, .8663, .8544, .8466],
    "prost-sir": [.8737, .8748, .8751, .8709, .8658, .8531, .8451],
    "covid-sir": [.7833, .7820, .7797, .7801, .7770, .7771, .7425],
    "heb-sir": [.8362, .8361, .8374, .8375, .7801, .7750, .7709],
}
TAU_F1_MEAN = [.8669, .8699, .8719, .8726, .8649, .8594, .8494]
TAU_NRMSE = {
    "ba-si": [.0981, .0970, .0954, .0937, .0934, .0941, .1024],
    "er-si": [.1027, .1000, .0975, .0963, .0948, .0991, .1059],
    "oregon2-si": [.1019, .0969, .0951, .0947, .0966, .1015, .1092],
    "prost-si": [.0967, .0944, .0939, .0950, .0972, .1039, .1098],
    "farmers-si": [.0992, .0975, .0947, .0921, .0913, .0935, .0971],
    "pol-si": [.1088, .1056, .1032, .1026, .1035, .1064, .1125],
    "ba-sir": [.1030, .0999, .0971, .0969, .1034, .1135, .1218],
    "er-sir": [.1007, .0990, .0965, .0957, .1024, .1134, .1197],
    "oregon2-sir": [.1047, .1027, .1019, .1027, .1087, .1158, .1253],
    "prost-sir": [.0993, .0991, .0999, .1023, .1091, .1169, .1256],
    "covid-sir": [.1346, .1356, .1356, .1334, .1375, .1390, .1662],
    "heb-sir": [.1037, .1056, .1063, .1070, .1201, .1214, .1223],
}
TAU_NRMSE_MEAN = [.1045, .1028, .1014, .1010, .1048, .1099, .1181]

# tab:rate-robustness: generation (beta_i, beta_r) -> {dataset: (F1, NRMSE)}; Battus-Z at (.1, .1)
RATE_ROBUSTNESS = {
    (.10, .10): {"ba-si": (.9053, .0926), "ba-sir": (.8714, .1020), "er-si": (.8981, .0993), "er-sir": (.8665, .1024)},
    (.05, .05): {"ba-si": (.9078, .0923), "ba-sir": (.8820, .0896), "er-si": (.8933, .1002), "er-sir": (.8789, .0897)},
    (.10, .20): {"ba-si": (.9053, .0926), "ba-sir": (.8561, .1019), "er-si": (.8981, .0993), "er-sir": (.8457, .1030)},
    (.20, .05): {"ba-si": (.8894, .0954), "ba-sir": (.8720, .1056), "er-si": (.8781, .1044), "er-sir": (.8641, .1117)},
}
