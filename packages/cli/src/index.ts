export { LocalCluster, type LocalClusterOptions, type ClusterMember } from './cluster/local-cluster.js';
