export { LocalCluster, clusterPostgresDir, type LocalClusterOptions, type ClusterMember } from './cluster/local-cluster.js';
