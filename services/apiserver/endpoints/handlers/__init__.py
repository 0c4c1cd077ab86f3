"""Request handling shared by the fronts, as kube-apiserver's `endpoints/handlers`: query
parameters, body decoding with its bounds, patches, field managers and server-side apply
(fieldmanager/), watch and collection parameters, and the conversion of kinds served in
another version than the stored one."""
