0,1
1,2
% comment
5 4
