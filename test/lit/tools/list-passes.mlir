// RUN: inferx-opt --list-passes | filecheck %s
// Every registered pass is listed with its level.
// CHECK: inferx passes:
// CHECK-DAG: inferx-bind-parameters {{.*}}[iree]
// CHECK-DAG: inferx-add-output-entry {{.*}}[iree]
// CHECK-DAG: inferx-dispatch-report {{.*}}[iree]
// CHECK-DAG: inferx-lower-to-linalg {{.*}}[graph]
